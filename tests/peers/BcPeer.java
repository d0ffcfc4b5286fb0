// Bouncy Castle as a test peer (bcpg + bcprov, the lightweight "Bc" API only).
// Usage: java -cp bcprov.jar:bcpg.jar:DIR BcPeer JOBFILE
// Each line of JOBFILE is a job, fields separated by tabs:
//   generate OUT KIND CREATED HASH SUB1 [SUB2 ...]   a key; SUBn = KIND@CREATED@LIFETIME
//   decrypt  SECRET MESSAGE OUT                  the plaintext of MESSAGE into OUT
// CREATED is seconds since the epoch; LIFETIME seconds (0: never); HASH an OpenPGP id.
import java.io.*;
import java.math.BigInteger;
import java.nio.file.*;
import java.security.SecureRandom;
import java.util.*;
import org.bouncycastle.asn1.ASN1ObjectIdentifier;
import org.bouncycastle.asn1.x9.ECNamedCurveTable;
import org.bouncycastle.asn1.x9.X9ECParameters;
import org.bouncycastle.bcpg.*;
import org.bouncycastle.bcpg.sig.Features;
import org.bouncycastle.bcpg.sig.KeyFlags;
import org.bouncycastle.crypto.AsymmetricCipherKeyPair;
import org.bouncycastle.crypto.generators.*;
import org.bouncycastle.crypto.params.*;
import org.bouncycastle.openpgp.*;
import org.bouncycastle.openpgp.bc.BcPGPObjectFactory;
import org.bouncycastle.openpgp.operator.bc.*;

public class BcPeer {
    static final SecureRandom RANDOM = new SecureRandom();

    static AsymmetricCipherKeyPair pair(String kind, boolean signing) {
        if (kind.startsWith("rsa")) {
            RSAKeyPairGenerator g = new RSAKeyPairGenerator();
            g.init(new RSAKeyGenerationParameters(BigInteger.valueOf(0x10001), RANDOM,
                    Integer.parseInt(kind.substring(3)), 25));
            return g.generateKeyPair();
        }
        if (kind.equals("cv25519")) {
            if (signing) {
                Ed25519KeyPairGenerator g = new Ed25519KeyPairGenerator();
                g.init(new Ed25519KeyGenerationParameters(RANDOM));
                return g.generateKeyPair();
            }
            X25519KeyPairGenerator g = new X25519KeyPairGenerator();
            g.init(new X25519KeyGenerationParameters(RANDOM));
            return g.generateKeyPair();
        }
        String curve = Map.of("p256", "P-256", "p384", "P-384", "p521", "P-521").get(kind);
        X9ECParameters params = ECNamedCurveTable.getByName(curve);
        ASN1ObjectIdentifier oid = ECNamedCurveTable.getOID(curve);
        ECKeyPairGenerator g = new ECKeyPairGenerator();
        g.init(new ECKeyGenerationParameters(new ECNamedDomainParameters(oid, params), RANDOM));
        return g.generateKeyPair();
    }

    static int algorithm(String kind, boolean signing) {
        if (kind.startsWith("rsa")) return PublicKeyAlgorithmTags.RSA_GENERAL;
        if (!signing) return PublicKeyAlgorithmTags.ECDH;
        return kind.equals("cv25519") ? PublicKeyAlgorithmTags.EDDSA : PublicKeyAlgorithmTags.ECDSA;
    }

    static void generate(String[] f) throws Exception {
        String kind = f[2];
        Date created = new Date(Long.parseLong(f[3]) * 1000);
        int primaryAlgorithm = algorithm(kind, true);
        PGPKeyPair primary = new BcPGPKeyPair(primaryAlgorithm, pair(kind, true), created);
        PGPSignatureSubpacketGenerator hashed = new PGPSignatureSubpacketGenerator();
        hashed.setSignatureCreationTime(false, created);
        hashed.setKeyFlags(false, KeyFlags.CERTIFY_OTHER | KeyFlags.SIGN_DATA);
        hashed.setPreferredSymmetricAlgorithms(false, new int[] {SymmetricKeyAlgorithmTags.AES_256});
        hashed.setPreferredHashAlgorithms(false, new int[] {HashAlgorithmTags.SHA256});
        hashed.setFeature(false, Features.FEATURE_MODIFICATION_DETECTION);
        PGPKeyRingGenerator ring = new PGPKeyRingGenerator(
                PGPSignature.POSITIVE_CERTIFICATION, primary, "Provider Bouncy Castle <bc@provider.test>",
                new BcPGPDigestCalculatorProvider().get(HashAlgorithmTags.SHA1),
                hashed.generate(), null,
                new BcPGPContentSignerBuilder(primaryAlgorithm, Integer.parseInt(f[4])), null);
        for (int i = 5; i < f.length; i++) {
            String[] s = f[i].split("@");
            Date subCreated = new Date(Long.parseLong(s[1]) * 1000);
            PGPKeyPair sub = new BcPGPKeyPair(algorithm(s[0], false), pair(s[0], false), subCreated);
            PGPSignatureSubpacketGenerator subHashed = new PGPSignatureSubpacketGenerator();
            subHashed.setSignatureCreationTime(false, subCreated);
            subHashed.setKeyFlags(false, KeyFlags.ENCRYPT_COMMS | KeyFlags.ENCRYPT_STORAGE);
            long lifetime = Long.parseLong(s[2]);
            if (lifetime > 0) subHashed.setKeyExpirationTime(false, lifetime);
            ring.addSubKey(sub, subHashed.generate(), null);
        }
        try (OutputStream out = new ArmoredOutputStream(new FileOutputStream(f[1] + ".pub"))) {
            ring.generatePublicKeyRing().encode(out);
        }
        try (OutputStream out = new ArmoredOutputStream(new FileOutputStream(f[1] + ".sec"))) {
            ring.generateSecretKeyRing().encode(out);
        }
    }

    static void decrypt(String[] f) throws Exception {
        PGPSecretKeyRingCollection secrets;
        try (InputStream in = PGPUtil.getDecoderStream(new FileInputStream(f[1]))) {
            secrets = new PGPSecretKeyRingCollection(in, new BcKeyFingerprintCalculator());
        }
        try (InputStream in = PGPUtil.getDecoderStream(new FileInputStream(f[2]))) {
            Object o = new BcPGPObjectFactory(in).nextObject();
            if (o instanceof PGPMarker) o = new BcPGPObjectFactory(in).nextObject();
            PGPEncryptedDataList list = (PGPEncryptedDataList) o;
            for (PGPEncryptedData data : list) {
                PGPPublicKeyEncryptedData pked = (PGPPublicKeyEncryptedData) data;
                PGPSecretKey secret = secrets.getSecretKey(pked.getKeyID());
                if (secret == null) continue;
                PGPPrivateKey key = secret.extractPrivateKey(null);
                InputStream clear = pked.getDataStream(new BcPublicKeyDataDecryptorFactory(key));
                Object inner = new BcPGPObjectFactory(clear).nextObject();
                if (inner instanceof PGPCompressedData) {
                    inner = new BcPGPObjectFactory(((PGPCompressedData) inner).getDataStream()).nextObject();
                }
                byte[] plain = ((PGPLiteralData) inner).getInputStream().readAllBytes();
                if (!pked.isIntegrityProtected() || !pked.verify()) throw new PGPException("integrity check failed");
                Files.write(Paths.get(f[3]), plain);
                return;
            }
            throw new PGPException("no secret key for the message");
        }
    }

    public static void main(String[] args) throws Exception {
        int failures = 0;
        for (String line : Files.readAllLines(Paths.get(args[0]))) {
            if (line.isBlank()) continue;
            String[] f = line.split("\t");
            try {
                if (f[0].equals("generate")) generate(f); else decrypt(f);
            } catch (Exception e) {
                failures++;
                System.err.println("FAILED " + f[0] + " " + f[1] + ": " + e);
                e.printStackTrace();
            }
        }
        System.exit(failures == 0 ? 0 : 1);
    }
}
