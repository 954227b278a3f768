/** Exit code of a worker process that asks to be replaced (refresh_worker, a handler stuck past its timeout). */
export const EXIT_REPLACE = 75;
