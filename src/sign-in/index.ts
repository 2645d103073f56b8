import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { SignIn } from './service.js';

declare module 'fastify' {
  interface FastifyInstance {
    signIn: SignIn;
  }
}

/** `app.signIn`: the sign-in policy, steps and completion every door calls (service.ts). */
async function signInPlugin(app: FastifyInstance) {
  app.decorate('signIn', new SignIn({ db: app.db, clock: app.clock, tokens: app.tokens, mfa: app.mfa }));
}

export default fp(signInPlugin, { name: 'sign-in', dependencies: ['db', 'tokens', 'mfa'] });
