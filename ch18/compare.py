"""Compare chapter 18's pairs: python ch18/compare.py [--examples NAME ...] [--profile none|minimal|full]."""

from aisp.chapter import chapter_profile, main

profile = chapter_profile(__file__)

if __name__ == "__main__":
    main(__file__)
