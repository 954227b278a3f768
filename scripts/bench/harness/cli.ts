/** Helpers for a benchmark's command line: --help, usage errors (exit 2), integer flags. */
export function benchCli(name: string, usage: string) {
  const fail = (message: string): never => {
    console.error(`${name}: ${message}\n${usage}`);
    process.exit(2);
  };
  return {
    /** Prints the usage and exits 0. */
    help(): never {
      console.log(usage);
      process.exit(0);
    },
    fail,
    /** `value` as an integer >= `min`, else a usage error naming `--flag`. */
    int(flag: string, value: string, min = 1): number {
      const n = Number(value);
      if (!Number.isInteger(n) || n < min) fail(`--${flag} must be an integer >= ${min}, got ${value}`);
      return n;
    },
  };
}
