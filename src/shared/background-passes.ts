/**
 * The passes of a background job that drains a table (the mail sender, the webhook deliverer): while
 * started, a pass every `intervalMs` and on each nudge (after a commit that left work), never two at
 * once — a nudge during a pass runs one more after it. `stop` waits for the running pass.
 */
export class BackgroundPasses {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = true;

  constructor(
    private readonly pass: () => Promise<void>,
    private readonly onError: (error: unknown) => void,
    private readonly intervalMs = 1000,
  ) {}

  /** Whether the job is stopped (a long pass checks it to end early). */
  get isStopped(): boolean {
    return this.stopped;
  }

  /** Runs a pass now; harmless when one is running. */
  nudge(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.pass()
      .catch(this.onError)
      .finally(() => {
        this.running = null;
        if (this.again && !this.stopped) {
          this.again = false;
          this.nudge();
        }
      });
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.timer = setInterval(() => this.nudge(), this.intervalMs);
    this.timer.unref();
    this.nudge();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
