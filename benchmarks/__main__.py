"""``python -m benchmarks`` (from the checkout's root)."""

from .cli import app

if __name__ == "__main__":
    app()
