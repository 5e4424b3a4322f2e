"""The inverted indexes and retrieval: one tokenizer, posting lists and IDF, exact top-k with pruning, the
content term, branch preference and detail recall's snippets.
"""
