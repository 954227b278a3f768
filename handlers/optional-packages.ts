import spoolPackage from "../package.json" with { type: "json" };

/**
 * The packages each bundled model handler loads. They are optional peer dependencies of spool, so
 * that a project whose handlers use none of them does not install them (hundreds of MB).
 */
export const HANDLER_PACKAGES = {
  image: ["onnxruntime-node", "sharp", "@huggingface/transformers", "onnx-proto"],
  text: ["node-llama-cpp"],
} as const satisfies Record<string, (keyof typeof spoolPackage.peerDependencies)[]>;

/** Thrown when a model handler's package is not installed; the message is the command that installs them. */
export class MissingPackageError extends Error {
  override name = "MissingPackageError";
}

/**
 * Runs `load` (a dynamic import of the handler's heavy modules); a missing package of that
 * handler becomes a MissingPackageError naming the npm command that installs them all.
 */
export async function loadOptional<T>(handler: keyof typeof HANDLER_PACKAGES, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    const missing = /Cannot find (?:package|module) '([^']+)'/.exec((err as Error)?.message ?? "")?.[1];
    const packages: readonly (keyof typeof spoolPackage.peerDependencies)[] = HANDLER_PACKAGES[handler];
    if (!missing || !packages.some((p) => missing === p || missing.startsWith(`${p}/`))) throw err;
    const specs = packages.map((p) => `${p}@${spoolPackage.peerDependencies[p]}`).join(" ");
    // onnxruntime-node's install script would otherwise download CUDA libraries from outside npm.
    const env = handler === "image" ? "ONNXRUNTIME_NODE_INSTALL=skip " : "";
    throw new MissingPackageError(
      `the ${handler} handler needs ${missing}, which is not installed (its packages are optional dependencies of spool); install them with:\n  ${env}npm install ${specs}`,
      { cause: err },
    );
  }
}
