import type { S3Config } from "../../protocol/job-request.ts";
import { checkFileName, uploadToS3 } from "../../protocol/uploads.ts";
import type { FileStore } from "./file-store.ts";

/**
 * Files in a bucket configured on the server (`[server.files]`): presigned GET URLs valid for
 * 7 days, the longest S3 allows. Every server of a deployment can use the same bucket.
 */
export class S3FileStore implements FileStore {
  constructor(private readonly bucket: S3Config) {}

  async put(endpointId: string, jobId: string, name: string, data: Blob, contentType: string): Promise<string> {
    for (const part of [endpointId, jobId, name]) checkFileName(part);
    const objectPath = [this.bucket.objectPath?.replace(/^\/+|\/+$/g, ""), endpointId].filter(Boolean).join("/");
    return uploadToS3({ ...this.bucket, objectPath }, jobId, name, data, contentType);
  }

  prune(): number {
    return 0; // lifecycle rules of the bucket expire objects
  }
}
