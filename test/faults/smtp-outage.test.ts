import { afterAll, describe, expect, it } from 'vitest';
import { TEST_DIALECT } from '../helpers/app.js';
import { freePort, freshDatabaseUrl } from '../helpers/processes.js';
import { mailTo, startSmtp, type TestSmtp } from '../helpers/smtp.js';
import { call, isAlive, launch, pause, provision, report, type Server, until } from './harness.js';

// The SMTP server is down while users register: registrations still succeed (mail is queued in the
// outbox, in the same transaction), and once SMTP is back every verification mail arrives exactly once.
describe(`SMTP down, then up (${TEST_DIALECT})`, () => {
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>>;
  let server: Server | undefined;
  let smtp: TestSmtp | undefined;

  afterAll(async () => {
    if (server && isAlive(server)) server.child.kill('SIGKILL');
    await server?.done;
    await smtp?.close();
    await database?.drop();
  });

  it('delivers every mail once after the outage', async () => {
    database = await freshDatabaseUrl();
    const smtpPort = await freePort(); // nothing listens there yet: SMTP is down
    server = await launch(database, { SMTP_URL: `smtp://127.0.0.1:${smtpPort}`, EMAIL_FROM: 'Gatehouse <no-reply@gatehouse.test>' });
    const { clientId } = await provision(server.url);

    const addresses: string[] = [];
    const statuses: Record<string, number> = {};
    const outageStarted = performance.now();
    for (let i = 0; i < 12; i++) {
      const email = `smtp-outage-${TEST_DIALECT}-${i}@example.com`;
      const res = await call(`${server.url}/v1/auth/register`, { method: 'POST', json: { email, password: `smtp outage passphrase ${i}`, client_id: clientId } });
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      if (res.status === 201) addresses.push(email);
      await pause(200);
    }
    await pause(Math.max(0, 3000 - (performance.now() - outageStarted)));

    smtp = await startSmtp(smtpPort);
    const deliveredMs = await until(async () => addresses.every((a) => smtp!.mails.some((m) => mailTo(m) === a)), 45_000, 200);
    await pause(3000); // a duplicate would arrive by now
    const perAddress = addresses.map((a) => smtp!.mails.filter((m) => mailTo(m) === a).length);
    report(`SMTP outage (${TEST_DIALECT})`, { registrations: statuses, mailsQueued: addresses.length, mailsReceived: smtp.mails.length, deliveredMsAfterSmtpBack: Math.round(deliveredMs) });

    expect(statuses).toEqual({ 201: 12 });
    expect(perAddress).toEqual(addresses.map(() => 1));
    expect(new Set(smtp.mails.map((m) => m.messageId)).size).toBe(smtp.mails.length);
  });
});
