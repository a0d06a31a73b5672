-- Idempotency markers: a request's answer committed with the business write it answers.
-- A binary collation makes scope and key case-sensitive, as Redis compares its keys.

-- +goose Up
CREATE TABLE idempotency_markers (
    scope       varchar(255) NOT NULL,
    idem_key    varchar(255) NOT NULL,
    fingerprint varchar(64) NOT NULL,
    outcome     varchar(64) NOT NULL,
    body        mediumblob NOT NULL,
    created_at  datetime(6) NOT NULL,
    PRIMARY KEY (scope, idem_key),
    -- Serves Prune: the oldest markers first.
    KEY idempotency_markers_by_created_at (created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE idempotency_markers;
