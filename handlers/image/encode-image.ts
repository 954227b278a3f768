import sharp from "sharp";

export type ImageFormat = "png" | "jpeg";

/** Encodes interleaved 8-bit RGB as PNG or JPEG (quality 90). */
export async function encodeImage(
  rgb: Uint8Array,
  width: number,
  height: number,
  format: ImageFormat,
): Promise<{ bytes: Uint8Array; contentType: string }> {
  const image = sharp(rgb, { raw: { width, height, channels: 3 } });
  const bytes = format === "png" ? await image.png().toBuffer() : await image.jpeg({ quality: 90 }).toBuffer();
  return { bytes: new Uint8Array(bytes), contentType: `image/${format}` };
}
