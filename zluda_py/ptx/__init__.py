"""PTX front end: grammar-driven parser, AST, checks and printer."""
