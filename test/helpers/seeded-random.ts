// The tiny model's generator (mulberry32): floats in [0, 1), the same seed replays the same choices.
export { seededRandom } from "../../handlers/text/tiny-gguf.ts";
