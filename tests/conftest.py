import os

# Tests never touch the network: no model hub, no dataset download.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TQDM_DISABLE", "1")

import torch  # noqa: E402

torch.set_num_threads(min(2, os.cpu_count() or 1))
