const BEARER = /^Bearer +(\S+)$/i;

/**
 * The credential of an `Authorization: Bearer <credential>` header (RFC 6750 §2.1). The scheme is
 * case-insensitive (RFC 9110 §11.1: `bearer`, `BEARER` work too); one or more spaces follow it.
 */
export const bearerCredential = (header: string): string | undefined => BEARER.exec(header)?.[1];
