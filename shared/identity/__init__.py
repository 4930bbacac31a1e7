"""Identity: users, password and PIN hashes (ASP.NET Core Identity V3), bearer tokens."""
