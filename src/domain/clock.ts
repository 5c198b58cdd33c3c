/**
 * Where a class that keeps time (TTLs, idle windows, revalidation, counter windows) reads it. The default is the
 * system clock; a test passes its own and moves it, so an expiry is checked without waiting for it.
 */
export interface Clock {
  /** Milliseconds since the epoch, as `Date.now()`. */
  now(): number;
}

/** `Date.now` itself: a class holding it pays one property read per call, nothing allocated. */
export const systemClock: Clock = Date;
