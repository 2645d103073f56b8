import { describe, expect, it } from 'vitest';
import { expectNoSecretsInLogs } from '../helpers/log-secrets.js';

// The log check that the sign-in tests end with (docs/security/checklist.md#logging-and-errors) must still catch a real leak.
describe('expectNoSecretsInLogs', () => {
  const fails = (lines: string[], secret: string) => expect(() => expectNoSecretsInLogs(lines, [secret])).toThrow(/secret leaked to logs/);
  const passes = (lines: string[], secret: string) => expect(() => expectNoSecretsInLogs(lines, [secret])).not.toThrow();

  it('catches a secret standing whole: a JSON value, a query parameter, a sentence, a token', () => {
    fails(['{"level":30,"code":"152543"}'], '152543');
    fails(['{"url":"/mfa?code=152543&x=1"}'], '152543');
    fails(['wrong code 152543.'], '152543');
    fails(['{"msg":"Bearer rt_AbC-d_9"}'], 'rt_AbC-d_9');
  });

  it('ignores the same digits inside a timestamp, a longer number or after a decimal point', () => {
    passes(['{"time":1795697152543,"pid":1}'], '152543');
    passes(['{"responseTime":3.152543}'], '152543');
    passes(['{"id":"usr_01m8152543xz"}'], '152543');
  });
});
