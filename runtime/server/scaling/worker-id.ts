/**
 * A new id for a worker the scaler starts: its endpoint, then 128 random bits (hex). A worker id
 * is its key's and endpoint's once used; a random one cannot be guessed before it is, nor found
 * from the time a worker started.
 */
export function newWorkerId(endpointId: string): string {
  return `${endpointId}-${Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("hex")}`;
}
