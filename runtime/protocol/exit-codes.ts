/** Exit code of a worker process that asks to be replaced (refresh_worker, a handler stuck past its timeout). */
export const EXIT_REPLACE = 75;
/**
 * Exit code of a worker that cannot start and will not by trying again: its handler does not load
 * (file missing, syntax error, no default export), its options fail their schema, or its setup
 * threw an error marked permanent. 78 is EX_CONFIG of sysexits.h.
 */
export const EXIT_START_PERMANENT = 78;
