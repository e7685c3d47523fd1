"""Compare chapter 20's pairs: python ch20/compare.py [--examples NAME ...] [--profile none|minimal|full]."""

from aisp.chapter import chapter_profile, main

profile = chapter_profile(__file__)

if __name__ == "__main__":
    main(__file__)
