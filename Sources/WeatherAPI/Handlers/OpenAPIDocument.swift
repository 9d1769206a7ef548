let openAPIDocument = "{}"
