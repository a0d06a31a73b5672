package gormdb

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBind_NumbersPlaceholdersForPostgresOnly(t *testing.T) {
	q := "INSERT INTO t (a, b) VALUES " + tuples(2, 2)
	assert.Equal(t, "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)", Bind(Postgres, q))
	assert.Equal(t, "INSERT INTO t (a, b) VALUES (?, ?), (?, ?)", Bind(MySQL, q))
}
