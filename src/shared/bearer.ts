const BEARER = /^Bearer +(\S+)$/i;

/** The credential of an `Authorization: Bearer <credential>` header (RFC 6750 §2.1; the scheme is case-insensitive). */
export const bearerCredential = (header: string): string | undefined => BEARER.exec(header)?.[1];
