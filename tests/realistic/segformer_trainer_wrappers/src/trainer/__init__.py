"""Training utilities shared by the segmentation scripts."""
