import { createImageHandler } from "./handler.ts";

/** The fast image model (FLUX.1-schnell-like): 4 steps by default, no guidance. */
export default createImageHandler("fast");
