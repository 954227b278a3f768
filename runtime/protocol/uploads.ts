import { S3Client } from "bun";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { S3Config } from "./job-request.ts";

/** Upload URLs work this long (seconds): 7 days, S3's longest presign. */
export const UPLOAD_URL_SECONDS = 7 * 24 * 3600;

const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

export function checkFileName(name: string): void {
  if (!SAFE_NAME.test(name) || name.includes("..")) {
    throw new Error(`invalid upload name "${name}": use 1-200 of A-Z a-z 0-9 . _ - (no leading dot, no "..")`);
  }
}

export function toBlob(data: Blob | ArrayBuffer | Uint8Array | string, contentType: string): Blob {
  return data instanceof Blob ? data : new Blob([data] as ConstructorParameters<typeof Blob>[0], { type: contentType });
}

/**
 * The signing region: AWS endpoints name it (s3.eu-west-1.amazonaws.com); others (R2, MinIO,
 * radosgw) accept us-east-1.
 */
export function regionOf(endpointUrl: string): string {
  const m = /(?:^|\.)s3[.-]([a-z0-9-]+)\.amazonaws\.com$/.exec(new URL(endpointUrl).hostname);
  return m?.[1] ?? "us-east-1";
}

/** Writes through the job's own s3Config and returns a presigned GET URL valid for 7 days. */
export async function uploadToS3(s3: S3Config, jobId: string, name: string, data: Blob, contentType: string): Promise<string> {
  const client = new S3Client({
    accessKeyId: s3.accessId,
    secretAccessKey: s3.accessSecret,
    bucket: s3.bucketName,
    endpoint: s3.endpointUrl,
    region: regionOf(s3.endpointUrl),
  });
  const prefix = s3.objectPath ? `${s3.objectPath.replace(/^\/+|\/+$/g, "")}/` : "";
  const key = `${prefix}${jobId}/${name}`;
  await client.write(key, data, { type: contentType });
  return client.presign(key, { method: "GET", expiresIn: UPLOAD_URL_SECONDS });
}

/** For `spool run` with no server: files go under ./spool-output and the URL is a file:// URL. */
export async function uploadToDirectory(dir: string, jobId: string, name: string, data: Blob): Promise<string> {
  const folder = resolve(dir, jobId);
  mkdirSync(folder, { recursive: true });
  const path = join(folder, name);
  await Bun.write(path, data);
  return pathToFileURL(path).href;
}
