#pragma once
// A plain HTTP(S) file server for tests that read checkpoints from a URL
// (tests/core/storage/range_http_server.py: HEAD and single-range GETs, as a model host answers).

#include <QProcess>
#include <QString>
#include <QStringList>
#include <filesystem>

namespace testutil {

// tests/core/storage/range_http_server.py serving `root` (HTTPS with `cert`), for as long as the
// object lives; port() is 0 when it did not come up.
class RangeServer {
public:
    explicit RangeServer(const std::filesystem::path& root, const QString& cert = {}, const QString& key = {})
    {
        QStringList args = {QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/core/storage/range_http_server.py"),
                            QString::fromStdString(root.string())};
        if (!cert.isEmpty())
            args << QStringLiteral("--cert") << cert << QStringLiteral("--key") << key;
        m_process.start(QStringLiteral("python3"), args);
        if (m_process.waitForReadyRead(10000))
            m_port = m_process.readLine().trimmed().toInt();
    }
    ~RangeServer()
    {
        m_process.terminate();
        m_process.waitForFinished(5000);
    }
    int port() const { return m_port; }

private:
    QProcess m_process;
    int m_port = 0;
};

// A self-signed certificate for 127.0.0.1 (one day), for a RangeServer that speaks HTTPS.
inline bool self_signed_certificate(const QString& cert, const QString& key)
{
    QProcess openssl;
    openssl.start(QStringLiteral("openssl"),
                  {QStringLiteral("req"), QStringLiteral("-x509"), QStringLiteral("-newkey"),
                   QStringLiteral("rsa:2048"), QStringLiteral("-nodes"), QStringLiteral("-subj"),
                   QStringLiteral("/CN=127.0.0.1"), QStringLiteral("-days"), QStringLiteral("1"),
                   QStringLiteral("-keyout"), key, QStringLiteral("-out"), cert});
    return openssl.waitForFinished(30000) && openssl.exitStatus() == QProcess::NormalExit && openssl.exitCode() == 0;
}

} // namespace testutil
