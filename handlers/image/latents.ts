import { SeededRandom } from "./random.ts";

/** The VAE scales latents up 8x; FLUX packs 2x2 latent pixels into one token. */
export const VAE_SCALE = 8;

/** Image tokens of a width x height image: one per 16x16 pixels. */
export function imageTokens(width: number, height: number): { rows: number; cols: number; count: number } {
  const rows = height / (VAE_SCALE * 2);
  const cols = width / (VAE_SCALE * 2);
  return { rows, cols, count: rows * cols };
}

/** Starting noise in the packed layout [1, tokens, channels*4], fixed by the seed. */
export function initialNoise(seed: number, tokens: number, packedChannels: number): Float32Array {
  return new SeededRandom(seed).normals(tokens * packedChannels);
}

/** img_ids: [tokens, 3] = (0, row, col) per token, as FluxPipeline builds them. */
export function imageIds(rows: number, cols: number): Float32Array {
  const ids = new Float32Array(rows * cols * 3);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      ids[(r * cols + c) * 3 + 1] = r;
      ids[(r * cols + c) * 3 + 2] = c;
    }
  }
  return ids;
}

/**
 * Packed [tokens, channels*4] back to [channels, 2*rows, 2*cols] (diffusers' _unpack_latents):
 * a token's features are channel-major, then the 2x2 patch row-major.
 */
export function unpackLatents(packed: Float32Array, rows: number, cols: number, channels: number): Float32Array {
  const h = rows * 2;
  const w = cols * 2;
  const out = new Float32Array(channels * h * w);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const base = (r * cols + c) * channels * 4;
      for (let ch = 0; ch < channels; ch++) {
        for (let dy = 0; dy < 2; dy++) {
          for (let dx = 0; dx < 2; dx++) {
            out[ch * h * w + (2 * r + dy) * w + (2 * c + dx)] = packed[base + ch * 4 + dy * 2 + dx]!;
          }
        }
      }
    }
  }
  return out;
}

/** The VAE's [3, h, w] output in [-1, 1] to interleaved 8-bit RGB. */
export function toRgb(sample: Float32Array, width: number, height: number): Uint8Array {
  const plane = width * height;
  const rgb = new Uint8Array(plane * 3);
  for (let i = 0; i < plane; i++) {
    for (let ch = 0; ch < 3; ch++) {
      const v = (sample[ch * plane + i]! / 2 + 0.5) * 255;
      rgb[i * 3 + ch] = v <= 0 ? 0 : v >= 255 ? 255 : Math.round(v);
    }
  }
  return rgb;
}
