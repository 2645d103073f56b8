/**
 * Values the documented examples use (docs only; the contract test, test/openapi/contract.test.ts,
 * seeds a database where they exist, and replays every example against it).
 */
export const EXAMPLE = {
  appId: 'app_01k2v6x9ztq3m8p4r7w5y2b6dc',
  confidentialAppId: 'app_01k2v6xb8c4e6g8j0l2n4q6s8u',
  userId: 'usr_01k2v6xa4n7q2s5u8w1y3z6c9e',
  developerId: 'dev_01k2v6x7p3r5t7v9x1z3b5d7f9',
  email: 'ada@example.com',
  password: 'correct horse battery staple',
  redirectUri: 'https://app.example/callback',
  /** Stands for a live refresh token of the example user at the example app. */
  refreshToken: 'rt_01kbm3x9v2q8X1pV3nM5bL7kJ9hG2fD4sA6zC8xV0bN2mQ4wE6rT8',
  accessToken: 'eyJhbGciOiJFUzI1NiIsInR5cCI6ImF0K2p3dCIsImtpZCI6ImVzMjU2LTEifQ.eyJzdWIiOiJ1c3JfMDFrMnY2eGE0bjdxMnM1dTh3MXkzejZjOWUifQ.c2lnbmF0dXJl',
  idToken: 'eyJhbGciOiJSUzI1NiIsImtpZCI6InJzMjU2LTEifQ.eyJzdWIiOiJ1c3JfMDFrMnY2eGE0bjdxMnM1dTh3MXkzejZjOWUifQ.c2lnbmF0dXJl',
  time: '2025-06-01T12:00:00.000Z',
} as const;

/** The example user as apps see it. */
export const EXAMPLE_USER = {
  id: EXAMPLE.userId,
  email: EXAMPLE.email,
  email_verified: true,
  name: 'Ada Lovelace',
  phone_number: null,
  birthdate: null,
  created_at: EXAMPLE.time,
};

export const EXAMPLE_TOKENS = {
  access_token: EXAMPLE.accessToken,
  token_type: 'Bearer',
  expires_in: 900,
  refresh_token: EXAMPLE.refreshToken,
  scope: 'openid profile email',
  id_token: EXAMPLE.idToken,
};
