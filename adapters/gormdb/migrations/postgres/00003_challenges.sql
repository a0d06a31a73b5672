-- Challenges, upload sessions and verifications (SPEC §2). Ids and keys compare byte-wise
-- (COLLATE "C") so pages are ordered the same way on every database and in memory.

-- +goose Up
CREATE TABLE challenges (
    id         varchar(36) COLLATE "C" PRIMARY KEY,
    crew_id    varchar(36) COLLATE "C",
    title      varchar(200) NOT NULL,
    deadline   timestamptz(6) NOT NULL,
    created_at timestamptz(6) NOT NULL
);

CREATE TABLE upload_sessions (
    id           varchar(36) COLLATE "C" PRIMARY KEY,
    user_id      varchar(64) COLLATE "C" NOT NULL,
    challenge_id varchar(36) COLLATE "C",
    object_key   varchar(512) COLLATE "C" NOT NULL UNIQUE,
    file_name    varchar(255) NOT NULL,
    content_type varchar(64) NOT NULL,
    file_size    bigint NOT NULL,
    status       varchar(16) NOT NULL,
    requested_at timestamptz(6) NOT NULL,
    CONSTRAINT upload_sessions_status CHECK (status IN ('PENDING', 'COMPLETED', 'EXPIRED'))
);

-- Serves the expiry worker: the oldest PENDING sessions first.
CREATE INDEX upload_sessions_pending ON upload_sessions (status, requested_at);

CREATE TABLE verifications (
    id                varchar(36) COLLATE "C" PRIMARY KEY,
    user_id           varchar(64) COLLATE "C" NOT NULL,
    challenge_id      varchar(36) COLLATE "C" NOT NULL REFERENCES challenges (id) ON DELETE CASCADE,
    upload_session_id varchar(36) COLLATE "C" NOT NULL,
    image_key         varchar(512) COLLATE "C" NOT NULL,
    status            varchar(16) NOT NULL,
    requested_at      timestamptz(6) NOT NULL,
    CONSTRAINT verifications_one_per_user UNIQUE (challenge_id, user_id),
    CONSTRAINT verifications_one_per_session UNIQUE (upload_session_id)
);

-- Serves verification pages: by challenge in id order.
CREATE INDEX verifications_by_challenge ON verifications (challenge_id, id);

-- +goose Down
DROP TABLE verifications;
DROP TABLE upload_sessions;
DROP TABLE challenges;
