-- The account each token's limits are charged to (docs/api.md, "Limits"):
-- the root of its minting chain. A token minted with another token inherits
-- that token's account, so a user an owner invented, minting tokens for
-- itself, still spends the owner's streams, rate and budgets. Tokens from
-- before were recorded with their direct minter only: charged to it, or to
-- their own user.
ALTER TABLE tokens ADD COLUMN charged_to bigint REFERENCES users(id);
UPDATE tokens SET charged_to = COALESCE(minted_by, user_id);
