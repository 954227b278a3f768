import { describe, expect, test } from "bun:test";
import { imageCost } from "../../../handlers/image/cost.ts";

describe("imageCost = width * height / 1e6 * price, rounded up after the 10th decimal", () => {
  test("the spec's prices at the default and extreme sizes, exactly (no binary float error)", () => {
    expect(imageCost(1024, 1024, 0.02)).toBe(0.02097152);
    expect(imageCost(1024, 1024, 0.0024)).toBe(0.0025165824);
    expect(imageCost(256, 256, 0.02)).toBe(0.00131072);
    expect(imageCost(256, 256, 0.0024)).toBe(0.0001572864);
    expect(imageCost(1536, 1536, 0.02)).toBe(0.04718592);
    expect(imageCost(1536, 1536, 0.0024)).toBe(0.0056623104);
    expect(imageCost(1536, 256, 0.0024)).toBe(0.0009437184);
    // 1280*768/1e6 * 0.02 is 0.0196608 exactly; a naive round-up in binary floating point gives 0.0196608001
    expect(imageCost(1280, 768, 0.02)).toBe(0.0196608);
  });

  test("digits past the 10th decimal round up, never down", () => {
    // 320*256/1e6 * 0.00123456789 = 0.0001011358015488
    expect(imageCost(320, 256, 0.00123456789)).toBe(0.0001011359);
    // 6.5536e-12 rounds up to the smallest unit
    expect(imageCost(256, 256, 1e-10)).toBe(1e-10);
    // 1024*1024/1e6 * 0.3333333333333 = 0.349525333333298... -> ...3334
    expect(imageCost(1024, 1024, 0.3333333333333)).toBe(0.3495253334);
    // exactly 10 decimals stay as they are
    expect(imageCost(1000, 1000, 0.0000000001)).toBe(0.0000000001);
  });

  test("a zero price costs nothing; a negative or non-finite price is refused", () => {
    expect(imageCost(1024, 1024, 0)).toBe(0);
    expect(() => imageCost(1024, 1024, -1)).toThrow(RangeError);
    expect(() => imageCost(1024, 1024, Number.NaN)).toThrow(RangeError);
  });

  test("large prices in exponent form", () => {
    expect(imageCost(1024, 1024, 1e21)).toBe(1.048576e21);
  });
});
