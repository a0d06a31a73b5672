-- Crews and their members (SPEC §1). Ids use a binary collation so the UNIQUE key is
-- case-sensitive and member pages are ordered byte-wise, as on Postgres and in memory.

-- +goose Up
CREATE TABLE crews (
    id              varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    name            varchar(200) NOT NULL,
    max_members     int NOT NULL,
    current_members int NOT NULL DEFAULT 0,
    created_at      datetime(6) NOT NULL,
    CONSTRAINT crews_members_within_capacity
        CHECK (current_members >= 0 AND current_members <= max_members)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE crew_members (
    crew_id   varchar(36) COLLATE utf8mb4_bin NOT NULL,
    user_id   varchar(64) COLLATE utf8mb4_bin NOT NULL,
    joined_at datetime(6) NOT NULL,
    PRIMARY KEY (crew_id, user_id),
    -- Serves member pages: keyset on (joined_at, user_id) within a crew.
    KEY crew_members_by_joined_at (crew_id, joined_at, user_id),
    CONSTRAINT crew_members_crew FOREIGN KEY (crew_id) REFERENCES crews (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE crew_members;
DROP TABLE crews;
