import { createImageHandler } from "./handler.ts";

/** The quality image model (FLUX.1-dev-like): 28 steps by default, guidance, negative_prompt. */
export default createImageHandler("quality");
