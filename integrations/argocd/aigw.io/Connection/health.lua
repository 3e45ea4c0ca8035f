-- Argo CD health of an aigw.io Connection (cluster-scoped): Ready when aigw can obtain a token.
-- It has no Paused or Drifted condition; Stalled means only a change (of the Connection or of
-- the Secret it names) can help. Same kstatus order as the namespaced kinds.
--
-- Argo CD runs argocd-cm scripts without Lua's string library: only base and table are used.
local hs = {}

local function find(conditions, kind)
  for _, c in ipairs(conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function is_true(c)
  return c ~= nil and c.status == "True"
end

local function text(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  if c ~= nil and c.reason ~= nil and c.reason ~= "" then
    return c.reason
  end
  return fallback
end

local status = obj.status
if status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for aigw to report a status"
  return hs
end
local conditions = status.conditions or {}

local generation = obj.metadata.generation
local observed = status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for aigw to observe generation " .. tostring(generation)
  return hs
end

local stalled = find(conditions, "Stalled")
if is_true(stalled) then
  hs.status = "Degraded"
  hs.message = text(stalled, "Stalled")
  return hs
end

local reconciling = find(conditions, "Reconciling")
if is_true(reconciling) then
  hs.status = "Progressing"
  hs.message = text(reconciling, "Reconciling")
  return hs
end

local ready = find(conditions, "Ready")
if is_true(ready) then
  hs.status = "Healthy"
  hs.message = text(ready, "Ready")
  return hs
end

hs.status = "Progressing"
hs.message = text(ready, "Waiting for aigw to report Ready")
return hs
