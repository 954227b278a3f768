/**
 * A value, or a promise of it where it must be fetched. The requests of a job's path take the
 * value as it is when it is already known (a cached key, an admission counted in memory), since
 * an `await` costs each of them a suspension and a turn of the microtask queue.
 */
export type MaybePromise<T> = T | Promise<T>;

/** `then(value)` now when the value is known, after it arrives otherwise. */
export function andThen<T, U>(value: MaybePromise<T>, then: (value: T) => U): MaybePromise<U> {
  return value instanceof Promise ? value.then(then) : then(value);
}
