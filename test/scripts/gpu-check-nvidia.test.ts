import { expect, test } from "bun:test";
import { parseProcessTable } from "../../scripts/gpu-check/nvidia.ts";

// nvidia-smi 580's table: a Vulkan worker shows as a graphics context, which the compute-apps query leaves out.
const TABLE = `+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
|=========================================+========================+======================|
|   0  NVIDIA H200                    On  |   00000000:00:05.0 Off |                    0 |
| N/A   33C    P0            118W /  700W |    1205MiB / 143771MiB |      0%      Default |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A            4242      G   /tmp/spool-gpu-check-text/bun            612MiB |
|    0   N/A  N/A            4250    C+G   ...ool-gpu-check-image/bun (worker)      590MiB |
|    1   N/A  N/A             977      C   python3                                   12MiB |
+-----------------------------------------------------------------------------------------+
`;

test("the GPU check reads every process of nvidia-smi's table, graphics and Vulkan contexts included", () => {
  expect(parseProcessTable(TABLE)).toEqual([
    { gpu: "GPU 0", pid: 4242, type: "G", usedMb: 612 },
    { gpu: "GPU 0", pid: 4250, type: "C+G", usedMb: 590 },
    { gpu: "GPU 1", pid: 977, type: "C", usedMb: 12 },
  ]);
  expect(parseProcessTable("No devices were found\n")).toEqual([]);
});
