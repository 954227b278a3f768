/** diffusers' FlowMatchEulerDiscreteScheduler settings (scheduler/scheduler_config.json). */
export interface SchedulerConfig {
  base_image_seq_len: number;
  max_image_seq_len: number;
  base_shift: number;
  max_shift: number;
  shift: number;
  use_dynamic_shifting: boolean;
}

export const SCHEDULER_DEFAULTS: SchedulerConfig = {
  base_image_seq_len: 256,
  max_image_seq_len: 4096,
  base_shift: 0.5,
  max_shift: 1.15,
  shift: 1.0,
  use_dynamic_shifting: false,
};

/** FluxPipeline's mu: the shift grows linearly with the number of image tokens. */
export function resolutionShift(imageSeqLen: number, c: SchedulerConfig): number {
  const m = (c.max_shift - c.base_shift) / (c.max_image_seq_len - c.base_image_seq_len);
  return imageSeqLen * m + (c.base_shift - m * c.base_image_seq_len);
}

/**
 * The sigmas of a flow-matching Euler run: `steps` values from 1 down to 1/steps, shifted
 * (dynamically by resolution, exp(mu)/(exp(mu) + 1/s - 1), or by the fixed `shift`), then 0.
 * Timesteps given to the transformer are these sigmas (it scales them by 1000 itself).
 */
export function flowMatchSigmas(steps: number, imageSeqLen: number, c: SchedulerConfig): number[] {
  const sigmas = Array.from({ length: steps }, (_, i) => (steps === 1 ? 1 : 1 - (i * (1 - 1 / steps)) / (steps - 1)));
  const shifted = c.use_dynamic_shifting
    ? sigmas.map((s) => Math.exp(resolutionShift(imageSeqLen, c)) / (Math.exp(resolutionShift(imageSeqLen, c)) + (1 / s - 1)))
    : sigmas.map((s) => (c.shift * s) / (1 + (c.shift - 1) * s));
  return [...shifted, 0];
}

/** One Euler step: x + (sigma_next - sigma) * velocity, in place. */
export function eulerStep(latents: Float32Array, velocity: Float32Array, sigma: number, sigmaNext: number): void {
  const dt = sigmaNext - sigma;
  for (let i = 0; i < latents.length; i++) latents[i]! += dt * velocity[i]!;
}
