package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sessionlog/sessionlog/pkg/api"
)

// The reads of the audit index: each tenant's audit records numbered 1,
// 2, ... (TenantAuditKey, an api.AuditRecord as JSON), those a token of
// agents sees numbered again (AgentsAuditKey, the tenant's number), and
// the cursors of both.

// AuditCursor reads the audit stream sequence the tenants' audit records
// are indexed up to (0: none).
func (s Snapshot) AuditCursor() (uint64, error) {
	v, ok, err := s.Get(keyAuditCursor)
	if ok && len(v) == 8 {
		return binary.BigEndian.Uint64(v), err
	}
	return 0, err
}

// AgentsAuditCursor reads how far the audit records of tenant the agents
// see are indexed: the number of the tenant's last record judged, and
// the agents' number of their last (both 0: none).
func (s Snapshot) AgentsAuditCursor(tenant string, agents []string) (n, last uint64, err error) {
	v, ok, err := s.Get(AgentsAuditCursorKey(tenant, agents))
	if ok && len(v) == 16 {
		return binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:]), err
	}
	return 0, 0, err
}

// LastAudit reads the number of tenant's last indexed audit record (0:
// none).
func (s Snapshot) LastAudit(tenant string) (n uint64, err error) {
	p := TenantAuditPrefix(tenant)
	it, err := s.Iter(p)
	if err != nil {
		return 0, err
	}
	if it.Last() {
		n = TenantAuditN(p, it.Key())
	}
	return n, it.Close()
}

// TenantAudit calls fn with each audit record of tenant numbered after
// after, in number order, and its number, until fn returns false. A
// record that does not decode ends the walk with an error.
func (s Snapshot) TenantAudit(tenant string, after uint64, fn func(n uint64, a *api.AuditRecord) bool) (err error) {
	p := TenantAuditPrefix(tenant)
	it, err := s.Iter(p)
	if err != nil {
		return err
	}
	defer closeIter(it, &err)
	for ok := it.SeekGE(TenantAuditKey(tenant, after)); ok; ok = it.Next() {
		n := TenantAuditN(p, it.Key())
		if n <= after {
			continue
		}
		var a api.AuditRecord
		if err := json.Unmarshal(it.Value(), &a); err != nil {
			return fmt.Errorf("audit record %d of %s: %w", n, tenant, err)
		}
		if !fn(n, &a) {
			return nil
		}
	}
	return nil
}

// AgentsAudit calls fn with each audit record of tenant the agents see
// numbered (AgentsAuditKey) after after, in number order, and the agents'
// number of it, until fn returns false. A record the agents' index names
// that the tenant's does not hold, or that does not decode, ends the walk
// with an error.
func (s Snapshot) AgentsAudit(tenant string, agents []string, after uint64, fn func(m uint64, a *api.AuditRecord) bool) (err error) {
	p := AgentsAuditPrefix(tenant, agents)
	it, err := s.Iter(p)
	if err != nil {
		return err
	}
	defer closeIter(it, &err)
	for ok := it.SeekGE(AgentsAuditKey(tenant, agents, after)); ok; ok = it.Next() {
		m := TenantAuditN(p, it.Key())
		if m <= after || len(it.Value()) != 8 {
			continue
		}
		n := binary.BigEndian.Uint64(it.Value())
		v, ok, err := s.Get(TenantAuditKey(tenant, n))
		if err == nil && !ok {
			err = errors.New("not indexed")
		}
		var a api.AuditRecord
		if err == nil {
			err = json.Unmarshal(v, &a)
		}
		if err != nil {
			return fmt.Errorf("audit record %d of %s (%d of %s): %w", n, tenant, m, strings.Join(agents, ","), err)
		}
		if !fn(m, &a) {
			return nil
		}
	}
	return nil
}
