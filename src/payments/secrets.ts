import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { secretsKeyBytes } from '../config';

/**
 * Integration secrets at rest: AES-256-GCM with the SECRETS_KEY, a fresh 12-byte IV per value, and
 * the owner of the value (organization, provider, setting name) as additional data, so a sealed
 * value copied into another organization's or setting's place does not open.
 * Sealed form: `v1.<iv>.<tag>.<ciphertext>`, each base64url.
 */
export interface SecretBox {
  seal(plain: string, owner: string): string;
  open(sealed: string, owner: string): string;
}

export class SecretsNotConfigured extends Error {
  override readonly name = 'SecretsNotConfigured';
  constructor() {
    super('SECRETS_KEY is not set: integration secrets cannot be stored or read');
  }
}

export function createSecretBox(keyText: string | undefined): SecretBox {
  const key = keyText ? secretsKeyBytes(keyText) : null;
  const need = (): Buffer => {
    if (!key) throw new SecretsNotConfigured();
    return key;
  };
  return {
    seal(plain, owner) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', need(), iv);
      cipher.setAAD(Buffer.from(owner));
      const ciphertext = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return ['v1', iv, cipher.getAuthTag(), ciphertext].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
    },
    open(sealed, owner) {
      const [version, iv, tag, ciphertext] = sealed.split('.');
      if (version !== 'v1' || iv === undefined || tag === undefined || ciphertext === undefined) {
        throw new Error('not a sealed secret');
      }
      const decipher = createDecipheriv('aes-256-gcm', need(), Buffer.from(iv, 'base64url'));
      decipher.setAAD(Buffer.from(owner));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
    },
  };
}
