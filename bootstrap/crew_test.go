package bootstrap

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rushgate/rushgate/application/crew"
)

// A single-core process keeps one shared crew transaction out; more cores keep the default.
func TestCrewSharedTransactions_OneOnASingleCore(t *testing.T) {
	assert.Equal(t, 1, crewSharedTransactions(1))
	assert.Equal(t, crew.DefaultSharedTransactions, crewSharedTransactions(2))
	assert.Equal(t, crew.DefaultSharedTransactions, crewSharedTransactions(16))
}
