-- Challenges, upload sessions and verifications (SPEC §2). Ids and keys use a binary collation
-- so UNIQUE keys are case-sensitive and pages are ordered byte-wise, as on Postgres and in memory.

-- +goose Up
CREATE TABLE challenges (
    id         varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    crew_id    varchar(36) COLLATE utf8mb4_bin NULL,
    title      varchar(200) NOT NULL,
    deadline   datetime(6) NOT NULL,
    created_at datetime(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE upload_sessions (
    id           varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    user_id      varchar(64) COLLATE utf8mb4_bin NOT NULL,
    challenge_id varchar(36) COLLATE utf8mb4_bin NULL,
    object_key   varchar(512) COLLATE utf8mb4_bin NOT NULL,
    file_name    varchar(255) NOT NULL,
    content_type varchar(64) NOT NULL,
    file_size    bigint NOT NULL,
    status       varchar(16) NOT NULL,
    requested_at datetime(6) NOT NULL,
    UNIQUE KEY upload_sessions_object_key (object_key),
    -- Serves the expiry worker: the oldest PENDING sessions first.
    KEY upload_sessions_pending (status, requested_at),
    CONSTRAINT upload_sessions_status CHECK (status IN ('PENDING', 'COMPLETED', 'EXPIRED'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE verifications (
    id                varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    user_id           varchar(64) COLLATE utf8mb4_bin NOT NULL,
    challenge_id      varchar(36) COLLATE utf8mb4_bin NOT NULL,
    upload_session_id varchar(36) COLLATE utf8mb4_bin NOT NULL,
    image_key         varchar(512) COLLATE utf8mb4_bin NOT NULL,
    status            varchar(16) NOT NULL,
    requested_at      datetime(6) NOT NULL,
    UNIQUE KEY verifications_one_per_user (challenge_id, user_id),
    UNIQUE KEY verifications_one_per_session (upload_session_id),
    -- Serves verification pages: by challenge in id order.
    KEY verifications_by_challenge (challenge_id, id),
    CONSTRAINT verifications_challenge FOREIGN KEY (challenge_id) REFERENCES challenges (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE verifications;
DROP TABLE upload_sessions;
DROP TABLE challenges;
