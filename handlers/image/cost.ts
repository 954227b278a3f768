/**
 * What an image costs: width * height / 1e6 * price (per megapixel), rounded up after the 10th
 * decimal. Computed on exact decimals (the price as written), so 1024x1024 at 0.02 is
 * 0.02097152, not 0.0209715201 from binary floating-point error.
 */
export function imageCost(width: number, height: number, pricePerMegapixel: number): number {
  const [digits, scale] = decimal(pricePerMegapixel);
  // cost * 1e10 = width * height * digits * 1e10 / (1e6 * 10^scale), rounded up
  const num = BigInt(width) * BigInt(height) * digits * 10n ** 10n;
  const den = 10n ** BigInt(6 + scale);
  const units = (num + den - 1n) / den;
  return Number(`${units}e-10`);
}

/** A non-negative finite number as digits * 10^-scale, from its shortest decimal form. */
function decimal(x: number): [bigint, number] {
  if (!Number.isFinite(x) || x < 0) throw new RangeError(`price must be a non-negative number, got ${x}`);
  const [mantissa, exp = "0"] = x.toExponential().split("e");
  const [int, frac = ""] = mantissa!.split(".");
  const scale = frac.length - Number(exp);
  const digits = BigInt(int! + frac);
  return scale >= 0 ? [digits, scale] : [digits * 10n ** BigInt(-scale), 0];
}
