"""Write a folder of JPEG images in the image-folder layout (one sub-folder per class) for the loader benchmark.

Images are ~500x375 (sizes vary by up to 20%), natural-looking enough for the entropy coder: smooth gradients,
a few shapes and some noise, saved at quality 90 with Pillow. The same files are read by both loaders.

    python gen_jpegs.py OUT_DIR [--images 2000] [--classes 10] [--seed 0]
"""

import argparse
import os

import numpy as np
from PIL import Image, ImageDraw


def image(rng: np.random.Generator) -> Image.Image:
    w = int(500 * rng.uniform(0.8, 1.2))
    h = int(375 * rng.uniform(0.8, 1.2))
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    channels = []
    for _ in range(3):
        a, b, c = rng.uniform(0.002, 0.03, 3)
        base = 128 + 60 * np.sin(a * x + rng.uniform(0, 6)) + 50 * np.cos(b * y + c * x)
        channels.append(base)
    arr = np.stack(channels, axis=-1) + rng.normal(0, 12, (h, w, 3))
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(6):
        x0, y0 = rng.integers(0, w), rng.integers(0, h)
        x1, y1 = x0 + rng.integers(20, 200), y0 + rng.integers(20, 200)
        color = tuple(int(v) for v in rng.integers(0, 256, 3))
        (draw.ellipse if rng.uniform() < 0.5 else draw.rectangle)([x0, y0, x1, y1], fill=color)
    return img


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    for i in range(args.images):
        cls = os.path.join(args.out, f"class_{i % args.classes:03d}")
        os.makedirs(cls, exist_ok=True)
        image(rng).save(os.path.join(cls, f"img_{i:05d}.jpg"), quality=90)


if __name__ == "__main__":
    main()
