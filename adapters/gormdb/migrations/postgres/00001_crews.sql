-- Crews and their members (SPEC §1). Ids compare byte-wise (COLLATE "C") so member pages are
-- ordered the same way on every database and in memory.

-- +goose Up
CREATE TABLE crews (
    id              varchar(36) COLLATE "C" PRIMARY KEY,
    name            varchar(200) NOT NULL,
    max_members     integer NOT NULL,
    current_members integer NOT NULL DEFAULT 0,
    created_at      timestamptz(6) NOT NULL,
    CONSTRAINT crews_members_within_capacity
        CHECK (current_members >= 0 AND current_members <= max_members)
);

CREATE TABLE crew_members (
    crew_id   varchar(36) COLLATE "C" NOT NULL REFERENCES crews (id) ON DELETE CASCADE,
    user_id   varchar(64) COLLATE "C" NOT NULL,
    joined_at timestamptz(6) NOT NULL,
    PRIMARY KEY (crew_id, user_id)
);

-- Serves member pages: keyset on (joined_at, user_id) within a crew.
CREATE INDEX crew_members_by_joined_at ON crew_members (crew_id, joined_at, user_id);

-- +goose Down
DROP TABLE crew_members;
DROP TABLE crews;
