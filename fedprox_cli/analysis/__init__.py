"""From run folders to results: grouping runs, curves, figures and tables."""
