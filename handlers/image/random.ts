/**
 * A seeded random stream (xoshiro128**, seeded through splitmix64): the same seed gives the same
 * numbers on every machine, so a job's seed fixes its starting noise and the tiny model's weights.
 */
export class SeededRandom {
  readonly #s = new Uint32Array(4);
  #spare: number | undefined;

  /** Any integer seed; negative and very large ones are taken modulo 2^64. */
  constructor(seed: number | bigint) {
    let x = BigInt.asUintN(64, BigInt(seed));
    for (let i = 0; i < 2; i++) {
      // splitmix64: spreads even small, similar seeds over the whole state
      x = BigInt.asUintN(64, x + 0x9e3779b97f4a7c15n);
      let z = x;
      z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
      z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
      z ^= z >> 31n;
      this.#s[2 * i] = Number(z & 0xffffffffn);
      this.#s[2 * i + 1] = Number(z >> 32n);
    }
    if (this.#s.every((v) => v === 0)) this.#s[0] = 1;
  }

  /** A uniform 32-bit unsigned integer. */
  nextUint32(): number {
    const s = this.#s;
    const result = Math.imul(rotl(Math.imul(s[1]!, 5), 7), 9) >>> 0;
    const t = s[1]! << 9;
    s[2]! ^= s[0]!;
    s[3]! ^= s[1]!;
    s[1]! ^= s[2]!;
    s[0]! ^= s[3]!;
    s[2]! ^= t;
    s[3] = rotl(s[3]!, 11);
    return result;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Standard normal (Box-Muller). */
  normal(): number {
    if (this.#spare !== undefined) {
      const v = this.#spare;
      this.#spare = undefined;
      return v;
    }
    const u = 1 - this.next(); // (0, 1]: log(0) never happens
    const v = this.next();
    const r = Math.sqrt(-2 * Math.log(u));
    this.#spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }

  /** `n` standard normal values. */
  normals(n: number, scale = 1): Float32Array {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = this.normal() * scale;
    return out;
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
