/**
 * Authentication context class references (OIDC Core §2 `acr`). Every way to sign in today (password,
 * emailed link or code, the external provider) is one factor; the value names that level so that an
 * app can tell it apart from a stronger one once more factors exist.
 */
export const ACR_SINGLE_FACTOR = 'urn:gatehouse:acr:1fa';

export const ACR_VALUES_SUPPORTED = [ACR_SINGLE_FACTOR];
