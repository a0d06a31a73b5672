-- Idempotency keys compare exactly (SPEC §0: 1–255 printable ASCII characters, space included).
-- utf8mb4_bin is a PAD SPACE collation, so "abc" and "abc " were one key: a request with the
-- second, made after the first, found no marker of its own and failed to save one for an hour.
-- Binary strings compare byte by byte, with no padding, on MariaDB and MySQL 8 alike (MySQL's
-- NO PAD collations are not MariaDB's). Keys and scopes (user ids) are ASCII, so 255 bytes hold
-- what 255 characters held. Every other string key holds a value validated to exclude spaces:
-- UUIDs, user ids (printable ASCII without spaces) and server-made keys and tokens. Going down
-- fails while two keys differ only in trailing spaces: the older schema cannot hold both.

-- +goose Up
ALTER TABLE idempotency_markers
    MODIFY scope varbinary(255) NOT NULL,
    MODIFY idem_key varbinary(255) NOT NULL;

-- +goose Down
ALTER TABLE idempotency_markers
    MODIFY scope varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    MODIFY idem_key varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
