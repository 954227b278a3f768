/** Whether this process is a compiled executable (its own sources are inside it, under /$bunfs or B:/~BUN on Windows). */
export const isCompiled = (): boolean => Bun.main.startsWith("/$bunfs/") || /^[A-Z]:[\\/]~BUN/.test(Bun.main);

/** Whether an endpoint's or worker's handler is a source file (run by `spool worker`) rather than a built binary. */
export const isHandlerSource = (path: string): boolean => /\.(ts|tsx|js|mjs|cjs)$/.test(path);
